//! RPC mode costs: framing throughput, command round trips through the real `pi --mode rpc`
//! process over pipes, and streaming a long answer as events (every `message_update` carries
//! the partial message, as the reference's do).
//!
//! Run: `cargo bench --bench rpc` (release profile; prints one line per figure).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use pi::modes::rpc::{LineSplitter, serialize_record};
use serde_json::{Value, json};

const RECORDS: usize = 20_000;
const ROUND_TRIPS: usize = 2_000;
const DELTAS: usize = 2_000;

fn framing() {
    let text = "x".repeat(900) + "\u{2028}é";
    let record = serialize_record(&json!({"type": "prompt", "message": text}));
    let input: Vec<u8> = record.as_bytes().repeat(RECORDS);
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        let mut splitter = LineSplitter::new();
        let mut count = 0;
        for piece in input.chunks(64 * 1024) {
            count += splitter.push(piece).len();
        }
        assert_eq!(count, RECORDS);
        best = best.min(start.elapsed());
    }
    let mb = input.len() as f64 / 1e6;
    println!(
        "framing: split {RECORDS} records ({mb:.1} MB) in 64 KiB reads: {:.0} MB/s",
        mb / best.as_secs_f64()
    );

    let event = json!({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "word "},
        "message": {"role": "assistant", "content": [{"type": "text", "text": "word ".repeat(400)}], "api": "openai-completions",
        "provider": "mock", "model": "m", "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}, "stopReason": "stop", "timestamp": 1}});
    let start = Instant::now();
    let mut bytes = 0;
    for _ in 0..RECORDS {
        bytes += serialize_record(&event).len();
    }
    let elapsed = start.elapsed();
    println!(
        "framing: serialise a 2 KB message_update: {:.1} µs each, {:.0} MB/s",
        elapsed.as_secs_f64() * 1e6 / RECORDS as f64,
        bytes as f64 / 1e6 / elapsed.as_secs_f64()
    );
}

/// A running `pi --mode rpc`.
struct Rpc {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Rpc {
    fn start(dir: &std::path::Path) -> Self {
        let agent = dir.join("agent");
        let work = dir.join("work");
        std::fs::create_dir_all(&work).expect("workspace");
        let mut child = Command::new(env!("CARGO_BIN_EXE_pi"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dir)
            .env("PI_CODING_AGENT_DIR", &agent)
            .current_dir(&work)
            .args(["--mode", "rpc"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn pi");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Self {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).expect("write");
        self.stdin.write_all(b"\n").expect("write");
        self.stdin.flush().expect("flush");
    }

    /// Reads one record; returns its byte length and value.
    fn read(&mut self) -> (usize, Value) {
        let mut line = Vec::new();
        self.stdout.read_until(b'\n', &mut line).expect("read");
        assert!(!line.is_empty(), "pi closed stdout");
        let value = serde_json::from_slice(&line).expect("a JSON record");
        (line.len(), value)
    }
}

impl Drop for Rpc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx]
}

fn round_trips() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut rpc = Rpc::start(dir.path());
    let mut samples = Vec::with_capacity(ROUND_TRIPS);
    for idx in 0..ROUND_TRIPS {
        let start = Instant::now();
        rpc.send(&format!(r#"{{"id":"{idx}","type":"get_state"}}"#));
        let (_, response) = rpc.read();
        samples.push(start.elapsed());
        assert_eq!(response["success"], true);
    }
    samples.sort();
    println!(
        "round trip get_state (sequential, {ROUND_TRIPS}): p50 {:.0} µs, p99 {:.0} µs",
        percentile(&samples, 0.5).as_secs_f64() * 1e6,
        percentile(&samples, 0.99).as_secs_f64() * 1e6
    );
    let start = Instant::now();
    let mut batch = String::new();
    for idx in 0..ROUND_TRIPS {
        batch.push_str(&format!(r#"{{"id":"p{idx}","type":"get_state"}}"#));
        batch.push('\n');
    }
    rpc.stdin.write_all(batch.as_bytes()).expect("write");
    rpc.stdin.flush().expect("flush");
    for _ in 0..ROUND_TRIPS {
        rpc.read();
    }
    let elapsed = start.elapsed();
    println!(
        "pipelined get_state ({ROUND_TRIPS}): {:.0} commands/s",
        ROUND_TRIPS as f64 / elapsed.as_secs_f64()
    );
}

/// Serves one chat-completions request with `body` as its SSE stream, on its own thread.
fn serve_once(body: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().expect("accept");
        let mut request = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            let read = socket.read(&mut buf).expect("read request");
            request.extend_from_slice(&buf[..read]);
            let text = String::from_utf8_lossy(&request);
            if let Some(end) = text.find("\r\n\r\n") {
                let length: usize = text[..end]
                    .lines()
                    .find_map(|line| {
                        let (name, value) = line.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                if request.len() >= end + 4 + length {
                    break;
                }
            }
            if read == 0 {
                return;
            }
        }
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        let _ = socket.write_all(head.as_bytes());
        let _ = socket.write_all(body.as_bytes());
    });
    url
}

fn sse_text(deltas: usize) -> String {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut out = String::new();
    let mut push = |value: Value| {
        out.push_str("data: ");
        out.push_str(&value.to_string());
        out.push_str("\n\n");
    };
    push(chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    ));
    for idx in 0..deltas {
        push(chunk(json!({"content": format!("w{idx} ")}), Value::Null));
    }
    push(chunk(json!({}), json!("stop")));
    push(
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [],
                "usage": {"prompt_tokens": 10, "completion_tokens": deltas, "total_tokens": deltas + 10}}),
    );
    out.push_str("data: [DONE]\n\n");
    out
}

fn streaming() {
    let url = serve_once(sse_text(DELTAS));
    let dir = tempfile::tempdir().expect("temp dir");
    let agent = dir.path().join("agent");
    std::fs::create_dir_all(&agent).expect("agent dir");
    std::fs::write(
        agent.join("models.json"),
        format!(
            r#"{{"providers":{{"mock":{{"baseUrl":"{url}/v1","api":"openai-completions","apiKey":"k","models":[{{"id":"m"}}]}}}}}}"#
        ),
    )
    .expect("models.json");
    let mut rpc = Rpc::start(dir.path());
    let start = Instant::now();
    rpc.send(r#"{"id":"1","type":"prompt","message":"Go"}"#);
    let mut records = 0usize;
    let mut bytes = 0usize;
    let mut first_update = None;
    loop {
        let (len, record) = rpc.read();
        records += 1;
        bytes += len;
        if first_update.is_none() && record["type"] == "message_update" {
            first_update = Some(start.elapsed());
        }
        if record["type"] == "agent_end" {
            break;
        }
    }
    let elapsed = start.elapsed();
    println!(
        "stream a {DELTAS}-delta answer: {records} records, {:.1} MB in {:.0} ms ({:.0} records/s, {:.0} MB/s); first update after {:.1} ms",
        bytes as f64 / 1e6,
        elapsed.as_secs_f64() * 1e3,
        records as f64 / elapsed.as_secs_f64(),
        bytes as f64 / 1e6 / elapsed.as_secs_f64(),
        first_update.unwrap_or_default().as_secs_f64() * 1e3
    );
}

fn main() {
    framing();
    round_trips();
    streaming();
}
