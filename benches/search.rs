//! Search benchmark (not run in CI): a generated corpus of many sessions (default 1,000 ×
//! 1,000 messages of prose, code and tool output), queried as whole `pi` processes, against
//! `rg -F` over the same conversations as JSONL files, in the same run.
//!
//! Run: `cargo bench --bench search -- [--sessions N] [--messages M] [--dir DIR] [--pi PATH]`
//! (`--dir` keeps the corpus and reuses it on the next run; building 1M messages takes
//! minutes; `--pi` times another build of pi, such as `scripts/build-release`'s).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pi::model::Entry;
use pi::store::{ListScope, SessionStore, StoreConfig, StoreLocation};
use pi::support::clock::SystemClock;
use pi::support::ids::IdSource;

#[path = "../tests/common/corpus.rs"]
mod corpus;

use corpus::{Rng, Vocabulary, session_lines};

fn open(db: &Path) -> SessionStore {
    SessionStore::open(StoreConfig {
        location: StoreLocation::File(db.to_path_buf()),
        clock: Arc::new(SystemClock),
        ids: Arc::new(IdSource::seeded(1)),
        busy_timeout: Duration::from_secs(30),
    })
    .expect("open store")
}

fn time_command(mut command: Command, runs: usize) -> (Vec<Duration>, Vec<u8>) {
    let mut times = Vec::with_capacity(runs);
    let mut last = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        let output = command.output().expect("run command");
        times.push(start.elapsed());
        last = output.stdout;
    }
    times.sort();
    (times, last)
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|arg| arg == name)
        .and_then(|idx| args.get(idx + 1))
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// Compares FTS5 tokenizers on the same documents: size, build time, query latency, and
/// whether identifiers, paths, error messages and CJK text are findable.
fn compare_tokenizers(db: &Path, sample: usize) {
    let conn = rusqlite::Connection::open(db).expect("open corpus");
    let mut texts: Vec<String> = Vec::with_capacity(sample + 8);
    {
        let mut stmt = conn
            .prepare("SELECT payload FROM entries ORDER BY eid LIMIT ?1")
            .expect("prepare");
        let rows = stmt
            .query_map([sample as i64], |row| row.get::<_, Vec<u8>>(0))
            .expect("query");
        for payload in rows.flatten() {
            if let Some(entry) = Entry::parse(&payload) {
                for doc in pi::store::search::docs_for(&entry) {
                    texts.push(doc.text.into_owned());
                }
            }
        }
    }
    // Probes: what people search for in coding sessions.
    let probes: &[(&str, &str, &str)] = &[
        (
            "identifier",
            "The SessionManager keeps the leaf.",
            "SessionManager",
        ),
        (
            "identifier part",
            "The SessionManager keeps the leaf.",
            "Manager",
        ),
        (
            "path",
            "edited src/auth.ts and src/auth.test.ts",
            "\"src/auth.ts\"",
        ),
        (
            "error message",
            "Error: connect ECONNREFUSED 127.0.0.1:5432",
            "\"ECONNREFUSED 127.0.0.1\"",
        ),
        (
            "snake_case",
            "call parse_session_file here",
            "parse_session_file",
        ),
        ("CJK 2-char word", "数据库连接失败，请检查配置", "连接"),
        ("CJK 4-char", "数据库连接失败，请检查配置", "连接失败"),
        ("diacritics", "Grüße aus Köln", "koln"),
    ];
    let probe_start = texts.len();
    for (_, text, _) in probes {
        texts.push((*text).to_owned());
    }
    let mem = rusqlite::Connection::open_in_memory().expect("memory db");
    println!("tokenizers over {} documents from the corpus:", texts.len());
    println!(
        "{:<34} {:>9} {:>9} {:>12} {:>12}",
        "tokenizer", "build s", "index MB", "word p50", "common p50"
    );
    let configs: &[(&str, &str, bool)] = &[
        (
            "unicode61 + CJK bigrams (chosen)",
            "unicode61 remove_diacritics 2",
            true,
        ),
        (
            "unicode61 (no CJK handling)",
            "unicode61 remove_diacritics 2",
            false,
        ),
        ("trigram", "trigram remove_diacritics 1", false),
        (
            "porter unicode61",
            "porter unicode61 remove_diacritics 2",
            true,
        ),
    ];
    let mut findable: Vec<Vec<bool>> = Vec::new();
    for (idx, (label, tokenize, bigrams)) in configs.iter().enumerate() {
        let table = format!("t{idx}");
        mem.execute_batch(&format!(
            "CREATE VIRTUAL TABLE {table} USING fts5(body, content='', tokenize='{tokenize}');"
        ))
        .expect("create");
        let start = Instant::now();
        mem.execute_batch("BEGIN").expect("begin");
        {
            let mut insert = mem
                .prepare(&format!(
                    "INSERT INTO {table} (rowid, body) VALUES (?1, ?2)"
                ))
                .expect("prepare");
            for (rowid, text) in texts.iter().enumerate() {
                let body = if *bigrams {
                    pi::store::search::index_text(text).into_owned()
                } else {
                    text.clone()
                };
                insert
                    .execute(rusqlite::params![rowid as i64, body])
                    .expect("insert");
            }
        }
        mem.execute_batch("COMMIT").expect("commit");
        let build = start.elapsed();
        let bytes: i64 = mem
            .query_row(
                "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name LIKE ?1",
                [format!("{table}%")],
                |row| row.get(0),
            )
            .unwrap_or(0);
        let time_query = |query: &str| -> Duration {
            let mut runs = Vec::new();
            for _ in 0..9 {
                let start = Instant::now();
                let mut stmt = mem
                    .prepare_cached(&format!(
                        "SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ?1 ORDER BY rowid DESC LIMIT 2000"
                    ))
                    .expect("prepare");
                let count = stmt
                    .query_map([query], |row| row.get::<_, i64>(0))
                    .map(|rows| rows.count())
                    .unwrap_or(0);
                std::hint::black_box(count);
                runs.push(start.elapsed());
            }
            runs.sort();
            runs[runs.len() / 2]
        };
        let word = time_query("\"cannot find\"");
        let common = time_query("\"the\"");
        println!(
            "{label:<34} {:>9.2} {:>9.1} {:>10.2}ms {:>10.2}ms",
            build.as_secs_f64(),
            bytes as f64 / 1e6,
            ms(word),
            ms(common)
        );
        let mut found = Vec::new();
        for (probe_idx, (_, _, query)) in probes.iter().enumerate() {
            let rendered = if *bigrams {
                pi::store::search::Query::parse(query)
                    .map(|parsed| parsed.to_fts())
                    .unwrap_or_default()
            } else {
                (*query).to_owned()
            };
            let target = (probe_start + probe_idx) as i64;
            let hit = mem
                .prepare(&format!("SELECT rowid FROM {table} WHERE {table} MATCH ?1"))
                .and_then(|mut stmt| {
                    stmt.query_map([rendered], |row| row.get::<_, i64>(0))
                        .map(|rows| rows.flatten().any(|rowid| rowid == target))
                })
                .unwrap_or(false);
            found.push(hit);
        }
        findable.push(found);
    }
    println!("findable (query → target document):");
    for (probe_idx, (what, _, query)) in probes.iter().enumerate() {
        let marks: Vec<&str> = findable
            .iter()
            .map(|found| if found[probe_idx] { "yes" } else { "no" })
            .collect();
        println!("  {what:<18} {query:<28} {}", marks.join("  "));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sessions: usize = arg(&args, "--sessions", 1000);
    let messages: usize = arg(&args, "--messages", 1000);
    let temp = tempfile::tempdir().expect("temp dir");
    let dir: PathBuf = arg(&args, "--dir", temp.path().to_path_buf());
    std::fs::create_dir_all(&dir).expect("corpus dir");
    let db = dir.join(format!("search-{sessions}x{messages}.db"));
    let jsonl_dir = dir.join(format!("jsonl-{sessions}x{messages}"));
    // `--pi PATH`: time another build of pi (the static release binary of
    // `scripts/build-release`); by default the one cargo built for this bench.
    let pi: PathBuf = arg(&args, "--pi", PathBuf::from(env!("CARGO_BIN_EXE_pi")));
    println!("pi binary: {}", pi.display());

    if !db.exists() {
        let build_start = Instant::now();
        let store = open(&db);
        std::fs::create_dir_all(&jsonl_dir).expect("jsonl dir");
        let mut rng = Rng(2026);
        let vocab = Vocabulary::new(&mut rng);
        for session_idx in 0..sessions {
            let (header, lines) = session_lines(&vocab, &mut rng, session_idx, messages);
            let header_line = header.to_line();
            store
                .insert_raw_session(&header, header_line.as_bytes(), &lines)
                .expect("insert");
            let mut file = std::io::BufWriter::new(
                std::fs::File::create(jsonl_dir.join(format!("{}.jsonl", header.id)))
                    .expect("jsonl file"),
            );
            writeln!(file, "{header_line}").expect("write");
            for line in &lines {
                file.write_all(&line.payload).expect("write");
                file.write_all(b"\n").expect("write");
            }
            if session_idx % 100 == 99 {
                eprintln!(
                    "  built {} sessions in {:.0?}",
                    session_idx + 1,
                    build_start.elapsed()
                );
            }
        }
        // As `pi import` does after a bulk load.
        store
            .optimize_search_index_after_load(0)
            .expect("merge the index");
        drop(store);
        let conn = rusqlite::Connection::open(&db).expect("checkpoint");
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .expect("checkpoint");
        eprintln!(
            "built {sessions} sessions × {messages} messages in {:.1?}",
            build_start.elapsed()
        );
    }

    if let Some(idx) = args.iter().position(|arg| arg == "--profile") {
        let fts = args
            .get(idx + 1)
            .cloned()
            .unwrap_or_else(|| "\"the\"".to_owned());
        let conn = rusqlite::Connection::open(&db).expect("open");
        for sql in [
            "SELECT count(*) FROM (SELECT rowid FROM search_fts WHERE search_fts MATCH ?1 ORDER BY rowid DESC LIMIT 2000)",
            "SELECT count(*) + sum(b) FROM (SELECT rowid, bm25(search_fts) AS b FROM search_fts WHERE search_fts MATCH ?1 ORDER BY rowid DESC LIMIT 2000)",
            "SELECT count(*) + sum(b) FROM (SELECT search_fts.rowid, bm25(search_fts) AS b FROM search_fts CROSS JOIN search_docs d ON d.docid = search_fts.rowid WHERE search_fts MATCH ?1 ORDER BY search_fts.rowid DESC LIMIT 2000)",
        ] {
            for _ in 0..3 {
                let start = Instant::now();
                let count: f64 = conn
                    .query_row(sql, [&fts], |row| row.get(0))
                    .expect("query");
                println!("{:>8.2} ms  {count}  {}", ms(start.elapsed()), &sql[..60]);
            }
        }
        return;
    }
    if args.iter().any(|arg| arg == "--tokenizers") {
        compare_tokenizers(&db, arg(&args, "--sample", 200_000));
        return;
    }

    let conn = rusqlite::Connection::open(&db).expect("inspect");
    let size_of = |like: &str| -> f64 {
        conn.query_row(
            "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name LIKE ?1",
            [like],
            |row| row.get::<_, i64>(0),
        )
        .map(|bytes| bytes as f64 / 1e6)
        .unwrap_or(f64::NAN)
    };
    let entries_mb = size_of("entries");
    let fts_mb = size_of("search_fts%");
    let docs_mb = size_of("search_docs%");
    let total_mb = std::fs::metadata(&db)
        .map(|meta| meta.len() as f64 / 1e6)
        .unwrap_or(0.0);
    let jsonl_mb: f64 = std::fs::read_dir(&jsonl_dir)
        .map(|dir| {
            dir.filter_map(|entry| entry.ok()?.metadata().ok())
                .map(|meta| meta.len() as f64)
                .sum::<f64>()
                / 1e6
        })
        .unwrap_or(0.0);
    let doc_count: i64 = conn
        .query_row("SELECT COUNT(*) FROM search_docs", [], |row| row.get(0))
        .unwrap_or(0);
    drop(conn);
    println!("corpus: {sessions} sessions × {messages} messages; {doc_count} search documents");
    println!(
        "sizes: database {total_mb:.0} MB, entries table {entries_mb:.0} MB, FTS index {fts_mb:.0} MB ({:.0}% of entries), doc map {docs_mb:.0} MB; JSONL {jsonl_mb:.0} MB",
        100.0 * fts_mb / entries_mb
    );

    // Listing.
    let store = open(&db);
    let mut in_process = Vec::new();
    for _ in 0..20 {
        let start = Instant::now();
        let list = store.list(&ListScope::All).expect("list");
        in_process.push(start.elapsed());
        assert_eq!(list.len(), sessions);
    }
    in_process.sort();
    drop(store);
    let mut list_cmd = Command::new(&pi);
    list_cmd.args([
        "--db",
        db.to_str().expect("utf-8 path"),
        "sessions",
        "list",
        "--all",
        "--json",
    ]);
    let (list_times, _) = time_command(list_cmd, 15);
    println!(
        "list {sessions} sessions: in-process median {:.2} ms; whole process median {:.2} ms, max {:.2} ms",
        ms(in_process[in_process.len() / 2]),
        ms(list_times[list_times.len() / 2]),
        ms(*list_times.last().expect("runs"))
    );

    // Queries: pick words by their frequency in the corpus vocabulary.
    let mut rng = Rng(2026);
    let vocab = Vocabulary::new(&mut rng);
    let rare = vocab.words[25_000].clone();
    let medium = vocab.words[3_000].clone();
    let medium2 = vocab.words[2_000].clone();
    let queries: Vec<(&str, Vec<String>, String)> = vec![
        ("one word (rare)", vec![rare.clone()], rare.clone()),
        ("one word (medium)", vec![medium.clone()], medium.clone()),
        (
            "two words",
            vec![medium.clone(), medium2.clone()],
            medium.clone(),
        ),
        (
            "phrase",
            vec![format!("\"cannot find value\"")],
            "cannot find value".to_owned(),
        ),
        ("very common word", vec!["the".to_owned()], "the".to_owned()),
        (
            "two very common words",
            vec!["the".to_owned(), "error".to_owned()],
            "the".to_owned(),
        ),
    ];
    println!(
        "{:<48} {:>8} {:>10} {:>10} {:>10} {:>12} {:>9}",
        "query", "hits", "pi p50", "pi p99", "pi max", "rg -F p50", "rg / pi"
    );
    // `pi sessions search SCOPE --json --limit 20 -- WORDS`.
    let search = |scope: &[&str], words: &[String]| {
        let mut cmd = Command::new(&pi);
        cmd.args([
            "--db",
            db.to_str().expect("utf-8 path"),
            "sessions",
            "search",
        ]);
        cmd.args(scope);
        cmd.args(["--json", "--limit", "20", "--"]);
        cmd.args(words);
        cmd
    };
    for (label, words, rg_pattern) in queries {
        let (times, stdout) = time_command(search(&["--all"], &words), 21);
        let hits = serde_json::from_slice::<serde_json::Value>(&stdout)
            .ok()
            .and_then(|value| value.as_array().map(Vec::len))
            .unwrap_or(0);
        let mut rg = Command::new("rg");
        rg.args(["-F", "--count-matches", "--no-messages", &rg_pattern])
            .arg(&jsonl_dir);
        let (rg_times, _) = time_command(rg, 3);
        let pi_p50 = ms(times[times.len() / 2]);
        let rg_p50 = ms(rg_times[rg_times.len() / 2]);
        println!(
            "{:<48} {hits:>8} {pi_p50:>8.2}ms {:>8.2}ms {:>8.2}ms {rg_p50:>10.1}ms {:>8.0}x",
            format!("{label} ({})", words.join(" ")),
            ms(times[(times.len() * 99) / 100]),
            ms(*times.last().expect("runs")),
            rg_p50 / pi_p50
        );
    }

    // The default scope: one directory's sessions (20 of the 1,000 here).
    println!("one directory's sessions (--cwd /home/dev/project-0, the default scope's shape):");
    let scoped: Vec<(&str, Vec<String>)> = vec![
        ("one word (rare)", vec![rare.clone()]),
        ("one word (medium)", vec![medium.clone()]),
        ("two words", vec![medium.clone(), medium2.clone()]),
        ("phrase", vec!["\"cannot find value\"".to_owned()]),
        ("very common word", vec!["the".to_owned()]),
        (
            "two very common words",
            vec!["the".to_owned(), "error".to_owned()],
        ),
    ];
    for (label, words) in scoped {
        let (times, _) = time_command(search(&["--cwd", "/home/dev/project-0"], &words), 11);
        println!(
            "{:<48} {:>8.2}ms p50 {:>8.2}ms max",
            format!("{label} ({})", words.join(" ")),
            ms(times[times.len() / 2]),
            ms(*times.last().expect("runs"))
        );
    }
}
