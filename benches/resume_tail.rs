//! What a long uncompacted tail costs `pi -c -p` (not run in CI): whole `pi` processes, a
//! fresh `pi -p` turn against `pi -c -p` continuing a session whose path holds `ENTRIES`
//! entries since its start (no compaction), interleaved, against a scripted model.
//! Goal (issue 23): the continued turn's overhead over the fresh one under 150 ms.
//!
//! ```text
//! cargo bench --bench resume_tail [-- RUNS [ENTRIES]]
//! ```
//!
//! The model is a minimal HTTP/1.1 server on a thread of this process (127.0.0.1): it reads
//! each request and answers with one short OpenAI-compatible SSE text. The long session is a
//! reference JSONL file (user messages of ~300 bytes and assistant answers of ~1,200 bytes,
//! as a chat produces) imported once with `pi import`; every `-c` run appends its turn to it,
//! two entries more per run. Fresh turns run in a second working directory, so that `-c`
//! always continues the long session. Figures: best and median wall time of each, and the
//! difference of the medians. Also printed: the request body size the continued turn sends
//! (the whole tail is the model's context).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

fn pi_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_pi"))
}

/// Answers every request on `listener` with one SSE text; records the largest body seen.
fn serve(listener: TcpListener, largest: Arc<AtomicUsize>) {
    for stream in listener.incoming().flatten() {
        let largest = largest.clone();
        std::thread::spawn(move || {
            let _ = answer(stream, &largest);
        });
    }
}

fn answer(stream: TcpStream, largest: &AtomicUsize) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body)?;
        largest.fetch_max(length, Ordering::Relaxed);
        let chunk = json!({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "mock-model",
            "choices": [{"index": 0, "delta": {"content": "Done."}, "finish_reason": null}]
        });
        let end = json!({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "mock-model",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 2, "total_tokens": 122}
        });
        let sse = format!("data: {chunk}\n\ndata: {end}\n\ndata: [DONE]\n\n");
        write!(
            writer,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{sse}",
            sse.len()
        )?;
        writer.flush()?;
    }
}

/// Writes a reference session file of `entries` entries (user and assistant alternating).
fn write_session(file: &Path, cwd: &Path, entries: usize) {
    let base_ms: i64 = 1_767_225_600_000;
    let iso = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .expect("a valid time")
            .format("%Y-%m-%dT%H:%M:%S%.3fZ")
            .to_string()
    };
    let mut out = String::new();
    out.push_str(
        &json!({
            "type": "session", "version": 3,
            "id": "01970000-0000-7000-8000-00000000a11e",
            "timestamp": iso(base_ms), "cwd": cwd.display().to_string()
        })
        .to_string(),
    );
    out.push('\n');
    let words = "the quick brown fox jumps over a lazy dog while the build runs again ";
    let mut parent: Option<String> = None;
    for idx in 0..entries {
        let id = format!("{idx:08x}");
        let ms = base_ms + idx as i64 * 1000;
        let message = if idx % 2 == 0 {
            json!({
                "role": "user",
                "content": [{"type": "text", "text": format!("question {idx}: {}", words.repeat(4))}],
                "timestamp": ms
            })
        } else {
            json!({
                "role": "assistant",
                "content": [{"type": "text", "text": format!("answer {idx}: {}", words.repeat(17))}],
                "api": "openai-completions", "provider": "mock", "model": "mock-model",
                "usage": {"input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0,
                          "totalTokens": 120,
                          "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                "stopReason": "stop", "timestamp": ms
            })
        };
        let entry = json!({
            "type": "message", "id": id, "parentId": parent, "timestamp": iso(ms),
            "message": message
        });
        out.push_str(&entry.to_string());
        out.push('\n');
        parent = Some(id);
    }
    std::fs::write(file, out).expect("write the session file");
}

struct Sandbox {
    home: PathBuf,
    agent_dir: PathBuf,
}

impl Sandbox {
    fn pi(&self, cwd: &Path) -> Command {
        let mut command = Command::new(pi_bin());
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("PI_CODING_AGENT_DIR", &self.agent_dir)
            .env("PI_AUTO_IMPORT", "0")
            .env("NO_COLOR", "1")
            .current_dir(cwd)
            .stdin(Stdio::null());
        command
    }
}

fn timed(mut command: Command) -> Duration {
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

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    let runs: usize = args.first().and_then(|arg| arg.parse().ok()).unwrap_or(15);
    let entries: usize = args
        .get(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(10_000);

    // `PI_BENCH_DIR=DIR` keeps the sandbox there (to profile one run by hand afterwards).
    let temp = tempfile::tempdir().expect("temp dir");
    let root =
        std::env::var_os("PI_BENCH_DIR").map_or_else(|| temp.path().to_path_buf(), PathBuf::from);
    let sandbox = Sandbox {
        home: root.join("home"),
        agent_dir: root.join("agent"),
    };
    let long_cwd = root.join("long");
    let fresh_cwd = root.join("fresh");
    for dir in [&sandbox.home, &sandbox.agent_dir, &long_cwd, &fresh_cwd] {
        std::fs::create_dir_all(dir).expect("create dir");
    }

    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let largest = Arc::new(AtomicUsize::new(0));
    let serving = largest.clone();
    std::thread::spawn(move || serve(listener, serving));

    let models = json!({"providers": {"mock": {
        "baseUrl": format!("{url}/v1"), "api": "openai-completions", "apiKey": "test-key",
        "models": [{"id": "mock-model", "name": "Mock", "reasoning": false, "input": ["text"],
                    "contextWindow": 100_000_000, "maxTokens": 4096}]
    }}});
    std::fs::write(sandbox.agent_dir.join("models.json"), models.to_string()).expect("models");
    std::fs::write(
        sandbox.agent_dir.join("settings.json"),
        r#"{"defaultProvider":"mock","defaultModel":"mock-model","compaction":{"enabled":false}}"#,
    )
    .expect("settings");

    let file = root.join("long.jsonl");
    write_session(&file, &long_cwd, entries);
    let mut import = sandbox.pi(&long_cwd);
    import.arg("import").arg(&file);
    let took = timed(import);
    println!(
        "session of {entries} entries ({:.1} MiB), imported in {:.2} s; {runs} runs each, interleaved",
        std::fs::metadata(&file).map_or(0, |meta| meta.len()) as f64 / (1024.0 * 1024.0),
        took.as_secs_f64()
    );

    let fresh = || {
        let mut command = sandbox.pi(&fresh_cwd);
        command.args(["-p", "Say done."]);
        command
    };
    let resumed = || {
        let mut command = sandbox.pi(&long_cwd);
        command.args(["-c", "-p", "Say done."]);
        command
    };
    // One untimed round: the page cache holds the binary and the database.
    timed(fresh());
    timed(resumed());
    largest.store(0, Ordering::Relaxed);

    let mut fresh_times = Vec::with_capacity(runs);
    let mut resumed_times = Vec::with_capacity(runs);
    for _ in 0..runs {
        fresh_times.push(timed(fresh()));
        resumed_times.push(timed(resumed()));
    }
    let ms = |duration: Duration| duration.as_secs_f64() * 1000.0;
    let fresh_median = median(&mut fresh_times);
    let resumed_median = median(&mut resumed_times);
    println!(
        "fresh `pi -p`:       best {:7.1} ms  median {:7.1} ms",
        ms(fresh_times[0]),
        ms(fresh_median)
    );
    println!(
        "`pi -c -p` ({entries} tail): best {:7.1} ms  median {:7.1} ms",
        ms(resumed_times[0]),
        ms(resumed_median)
    );
    // `PI_BENCH_PROFILE=FILE`: one more continued turn under `perf record --call-graph=dwarf -o FILE`.
    if let Some(profile) = std::env::var_os("PI_BENCH_PROFILE") {
        let resumed = resumed();
        let mut perf = Command::new("perf");
        perf.arg("record")
            .arg("-g")
            .arg("-o")
            .arg(&profile)
            .arg("--");
        perf.arg(resumed.get_program()).args(resumed.get_args());
        perf.env_clear()
            .envs(
                resumed
                    .get_envs()
                    .filter_map(|(key, value)| Some((key, value?))),
            )
            .current_dir(&long_cwd)
            .stdin(Stdio::null());
        timed(perf);
    }
    println!(
        "overhead of the tail (median - median): {:.1} ms (goal < 150 ms); largest request body {:.1} MiB",
        ms(resumed_median) - ms(fresh_median),
        largest.load(Ordering::Relaxed) as f64 / (1024.0 * 1024.0)
    );
}
