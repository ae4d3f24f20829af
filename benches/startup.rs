//! Startup benchmark (not run in CI): time from spawning `pi` to its first REPL prompt on a
//! pseudo-terminal, with 1,000 sessions (10 entries each) in the database and a `models.json`
//! model configured — for a new session, for `pi -c` (which resumes the latest of the 100
//! sessions of the working directory and prints its history), and for `--no-session`.
//! Goal: under 20 ms.
//!
//! Run: `cargo bench --bench startup` (builds the release binary; prints one line per case:
//! median and 90th percentile of the runs).
//!
//! Each run opens a fresh pty (80×24), starts the binary with a cleared environment, reads
//! the terminal until the line editor is reading (bracketed paste switched on, prompt drawn),
//! then sends Ctrl+D and waits for the exit. The machine is shared, so the minimum is shown
//! next to the median and the 90th percentile.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::pty::{Winsize, openpty};
use pi::model::{SessionHeader, SessionId};
use pi::store::{RawEntry, SessionStore, StoreConfig, StoreLocation};
use pi::support::clock::{SteppingClock, iso_from_ms};
use pi::support::ids::IdSource;
use serde_json::json;

const SESSIONS: usize = 1000;
const PROJECTS: usize = 10;
const TURNS: usize = 5;
const RUNS: usize = 31;

fn populate(db: &Path, workspace: &Path) {
    let store = SessionStore::open(StoreConfig {
        location: StoreLocation::File(db.to_path_buf()),
        clock: Arc::new(SteppingClock::new(1_767_225_600_000, 1000)),
        ids: Arc::new(IdSource::seeded(3)),
        busy_timeout: Duration::from_secs(10),
    })
    .expect("open store");
    let base_ms: i64 = 1_767_225_600_000;
    for idx in 0..SESSIONS {
        let cwd = if idx % PROJECTS == 0 {
            workspace.display().to_string()
        } else {
            format!("/projects/p{}", idx % PROJECTS)
        };
        let start_ms = base_ms + idx as i64 * 60_000;
        let header = SessionHeader::new(
            SessionId::new(format!("01970000-0000-7000-8000-{idx:012x}")),
            iso_from_ms(start_ms),
            cwd,
            None,
        );
        let mut entries = Vec::new();
        let mut parent: Option<String> = None;
        for turn in 0..TURNS {
            let ms = start_ms + turn as i64 * 2000;
            let user = json!({
                "role": "user",
                "content": [{"type": "text", "text": format!("Question {turn} of session {idx}: how does the checkout flow handle retries?")}],
                "timestamp": ms
            });
            let assistant = json!({
                "role": "assistant",
                "content": [{"type": "text", "text": "The checkout flow retries the payment call three times with backoff, then reports the failure to the user. ".repeat(4)}],
                "api": "openai-completions", "provider": "mock", "model": "mock-model",
                "usage": {"input": 1200, "output": 80, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1280,
                          "cost": {"input": 0.0012, "output": 0.00016, "cacheRead": 0, "cacheWrite": 0, "total": 0.00136}},
                "stopReason": "stop", "timestamp": ms + 1000
            });
            for (offset, message) in [(0, user), (1000, assistant)] {
                let id = format!("{:08x}", entries.len() + idx * 100);
                let line = json!({
                    "type": "message", "id": id, "parentId": parent,
                    "timestamp": iso_from_ms(ms + offset), "message": message
                });
                entries.push(RawEntry::parse(line.to_string().as_bytes()).expect("entry line"));
                parent = Some(id);
            }
        }
        store
            .insert_raw_session(&header, header.to_line().as_bytes(), &entries)
            .expect("insert session");
    }
}

/// Starts `pi args` on a fresh pty and returns the time until the prompt is on the screen.
fn time_to_prompt(binary: &Path, root: &Path, args: &[&str]) -> Duration {
    let size = Winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = openpty(Some(&size), None).expect("openpty");
    let slave = pty.slave;
    let mut master = std::fs::File::from(pty.master);
    let start = Instant::now();
    let mut child = Command::new(binary)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root.join("home"))
        .env("TERM", "xterm-256color")
        .env("NO_COLOR", "1")
        .env("PI_CODING_AGENT_DIR", root.join("agent"))
        .current_dir(root.join("work"))
        .stdin(Stdio::from(slave.try_clone().expect("dup pty")))
        .stdout(Stdio::from(slave.try_clone().expect("dup pty")))
        .stderr(Stdio::from(slave))
        .spawn()
        .expect("spawn pi");
    let mut seen = Vec::new();
    let mut buf = [0u8; 65536];
    let elapsed = loop {
        let n = master.read(&mut buf).expect("read pty");
        assert!(n > 0, "pi closed the terminal before its prompt");
        seen.extend_from_slice(&buf[..n]);
        // The editor is reading once it has switched bracketed paste on and drawn the prompt
        // (history lines also start with `> `, so they do not count).
        let text = String::from_utf8_lossy(&seen);
        if let Some(pos) = text.find("\x1b[?2004h")
            && text[pos..].contains("> ")
        {
            break start.elapsed();
        }
    };
    master.write_all(b"\x04").expect("send Ctrl+D");
    // Drain the terminal until pi exits (a full pty buffer would block it).
    let reader = std::thread::spawn(move || {
        let mut sink = [0u8; 4096];
        while matches!(master.read(&mut sink), Ok(n) if n > 0) {}
    });
    let status = child.wait().expect("wait for pi");
    assert!(status.success(), "pi exited with {status}");
    drop(reader);
    elapsed
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |duration: Duration| duration.as_secs_f64() * 1000.0;
    println!(
        "{name:<44} min {:>5.1} ms   median {:>5.1} ms   p90 {:>5.1} ms   ({} runs)",
        ms(samples[0]),
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() * 9 / 10]),
        samples.len()
    );
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical root");
    for sub in ["agent", "home", "work"] {
        std::fs::create_dir_all(root.join(sub)).expect("dirs");
    }
    std::fs::write(
        root.join("agent/models.json"),
        r#"{"providers":{"mock":{"baseUrl":"http://127.0.0.1:9/v1","api":"openai-completions","apiKey":"test-key","models":[{"id":"mock-model","contextWindow":128000}]}}}"#,
    )
    .expect("models.json");
    let build = Instant::now();
    populate(&root.join("agent/pi.db"), &root.join("work"));
    println!(
        "database: {SESSIONS} sessions × {} entries, written in {:.1} s",
        TURNS * 2,
        build.elapsed().as_secs_f64()
    );
    let binary = Path::new(env!("CARGO_BIN_EXE_pi"));
    // One warm-up run so that the binary and the database are in the page cache.
    time_to_prompt(binary, &root, &[]);
    let cases: [(&str, &[&str]); 3] = [
        ("pi (new session)", &[]),
        ("pi -c (resume latest, print its history)", &["-c"]),
        ("pi --no-session", &["--no-session"]),
    ];
    for (name, args) in cases {
        let samples: Vec<Duration> = (0..RUNS)
            .map(|_| time_to_prompt(binary, &root, args))
            .collect();
        report(name, samples);
    }
}
